// IEEE half and bfloat16 to and from float (round to nearest even), for the places a library lacks them: MPI's
// reductions of 16-bit types, checks of GPU results on the host, the trainer's mixed precision.
#pragma once

#include <cstdint>

namespace srunway::common {

uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t half);
uint16_t FloatToBFloat16(float value);
float BFloat16ToFloat(uint16_t bf16);

}  // namespace srunway::common
