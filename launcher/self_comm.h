// The one-rank communicator: every collective is a copy. For a program started without a launcher.
#pragma once

#include <memory>

#include "launcher/comm.h"

namespace srunway::launcher {

std::unique_ptr<Comm> CreateSelfComm();

}  // namespace srunway::launcher
