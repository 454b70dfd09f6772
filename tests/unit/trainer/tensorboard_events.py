#!/usr/bin/python3
"""srunway-train --tensorboard-dir, read back as TensorBoard reads it.

Usage: tensorboard_events.py SRUNWAY_TRAIN WORK_DIR

The event files are read with python3-protobuf (messages built from the field numbers of TensorFlow's event.proto
and summary.proto) and every TFRecord frame's two CRCs checked with python3-crcmod's CRC-32C: both independent of
srunway-train's encoder. The scalars must be Megatron's tags with the values of the same run's --metrics-file (as
float32); a resumed run writes a new file, sorted after the first, that starts with TensorBoard's restart marker at
its first step; and a directory that cannot be made is one error line.
"""
import glob
import json
import math
import os
import shutil
import struct
import subprocess
import sys

try:
    import crcmod.predefined
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
except ImportError as e:  # install-deps.sh installs both
    print(f"skipped: {e} (python3-protobuf, python3-crcmod)")
    sys.exit(77)

TRAIN, WORK = sys.argv[1:3]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def event_class():
    """tensorflow.Event with the fields srunway-train writes, as event.proto and summary.proto number them."""
    f = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="tb_event.proto", package="tb", syntax="proto3")

    def message(name, fields, nested=()):
        m = descriptor_pb2.DescriptorProto(name=name)
        for field_name, number, kind, type_name, label in fields:
            field = m.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                field.type_name = type_name
        m.nested_type.extend(nested)
        return m

    one, many = f.LABEL_OPTIONAL, f.LABEL_REPEATED
    value = message("Value", [("tag", 1, f.TYPE_STRING, "", one), ("simple_value", 2, f.TYPE_FLOAT, "", one)])
    proto.message_type.append(message("Summary", [("value", 1, f.TYPE_MESSAGE, ".tb.Summary.Value", many)], [value]))
    session = message("SessionLog", [("status", 1, f.TYPE_INT32, "", one)])  # enum SessionStatus: START = 1
    proto.message_type.append(session)
    proto.message_type.append(message("Event", [
        ("wall_time", 1, f.TYPE_DOUBLE, "", one), ("step", 2, f.TYPE_INT64, "", one),
        ("file_version", 3, f.TYPE_STRING, "", one), ("summary", 5, f.TYPE_MESSAGE, ".tb.Summary", one),
        ("session_log", 6, f.TYPE_MESSAGE, ".tb.SessionLog", one)]))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName("tb.Event"))


Event = event_class()
crc32c = crcmod.predefined.mkCrcFun("crc-32c")


def masked(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_events(path):
    """The events of one file, each frame's CRCs checked (TFRecord: u64 length, its masked CRC, data, its CRC)."""
    events, data, at = [], open(path, "rb").read(), 0
    while at < len(data):
        header = data[at:at + 8]
        if len(data) - at < 16 or len(data) - at < 16 + struct.unpack("<Q", header)[0]:
            check(False, f"{path}@{at}: a record cut short ({len(data) - at} bytes left)")
            break
        (length,), (length_crc,) = struct.unpack("<Q", header), struct.unpack("<I", data[at + 8:at + 12])
        body = data[at + 12:at + 12 + length]
        (body_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        check(length_crc == masked(header), f"{path}@{at}: the length's CRC")
        check(body_crc == masked(body), f"{path}@{at}: the record's CRC")
        event = Event()
        event.ParseFromString(body)
        events.append(event)
        at += 16 + length
    return events


def scalars(events):
    """{tag: {step: value}}"""
    out = {}
    for event in events:
        for value in event.summary.value:
            out.setdefault(value.tag, {})[event.step] = value.simple_value
    return out


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def run(*args, want=0):
    done = subprocess.run([TRAIN, *args], capture_output=True, text=True)
    if done.returncode != want:
        failures.append(f"{' '.join(args)}: exit {done.returncode}, want {want}: {done.stderr}")
        print("FAIL:", failures[-1])
    return done


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
tb, ckpt, metrics = f"{WORK}/tb", f"{WORK}/ckpt", f"{WORK}/metrics.jsonl"
# Megatron's own flags.
common = ["--preset", "gpt-tiny", "--seq-length", "32", "--micro-batch-size", "2", "--global-batch-size", "4",
          "--mock-data", "--peak-tflops", "1", "--log-interval", "2", "--eval-interval", "3", "--eval-iters", "1",
          "--tensorboard-dir", tb, "--log-timers-to-tensorboard", "--log-throughput",
          "--log-validation-ppl-to-tensorboard", "--log-world-size-to-tensorboard", "--log-params-norm", "--log-memory-to-tensorboard",
          "--metrics-file", metrics,
          "--save", ckpt, "--load", ckpt]
run(*common, "--train-iters", "6")
files = sorted(glob.glob(f"{tb}/events.out.tfevents.*"))
check(len(files) == 1, f"one event file, not {files}")
first = read_events(files[0])
check(first[0].file_version == "brain.Event:2", f"the first event is the file version: {first[0]}")
got = scalars(first)
lines = [json.loads(line) for line in open(metrics)]
steps = {line["step"]: line for line in lines if "loss" in line}
valid = {line["step"]: line["valid_loss"] for line in lines if "valid_loss" in line}
check(sorted(steps) == [2, 4, 6] and sorted(valid) == [3, 6], f"metrics lines: {lines}")
for tag, key in [("lm loss", "loss"), ("learning-rate", "lr"), ("grad-norm", "grad_norm"),
                 ("params-norm", "params_norm")]:
    check(sorted(got.get(tag, {})) == [1, 2, 3, 4, 5, 6], f"{tag} at every step: {got.get(tag)}")
    for step, line in steps.items():
        check(got[tag].get(step) == f32(line[key]), f"{tag} at step {step}: {got[tag].get(step)}, metrics {line[key]}")
    # "vs samples": the same values at the samples consumed, 4 a step.
    by_samples = got.get(tag + " vs samples", {})
    check(by_samples == {4 * step: v for step, v in got[tag].items()}, f"{tag} vs samples: {by_samples}")
check(set(got.get("batch-size", {}).values()) == {4.0}, f"batch-size: {got.get('batch-size')}")
check(got.get("world-size") == {step: 1.0 for step in range(1, 7)}, f"world-size: {got.get('world-size')}")
# The device's memory: the peak the metrics give (GiB there), never below what is held now, which holds the model.
for step, line in steps.items():
    held, peak = got["mem-allocated-bytes"][step], got["mem-max-allocated-bytes"][step]
    check(math.isclose(peak, f32(line["peak_memory_gib"] * 2**30), rel_tol=1e-6), f"mem-max-allocated-bytes {peak}")
    check(0 < held <= peak and got["mem-allocated-count"][step] >= 1, f"memory at step {step}: {held}, {peak}")
for step, loss in valid.items():
    check(got.get("lm loss validation", {}).get(step) == f32(loss), f"lm loss validation at {step}: {got}")
    check(got.get("lm loss validation vs samples", {}).get(4 * step) == f32(loss), "lm loss validation vs samples")
    ppl = got.get("lm loss validation ppl", {}).get(step)
    check(ppl is not None and math.isclose(ppl, math.exp(loss), rel_tol=1e-6), f"ppl at {step}: {ppl}")
for step, line in steps.items():
    time_s = got.get("iteration-time", {}).get(step)
    check(time_s is not None and math.isclose(time_s, line["ms"] / 1e3, rel_tol=1e-6), f"iteration-time {time_s}")
    # Megatron's count for gpt-tiny at 32 tokens (worked by hand in planner_test), one rank.
    tflops = got.get("throughput", {}).get(step)
    want = line["tokens_per_s"] * 6 * (2 * 51200 + 32768) / 1e12
    check(tflops is not None and math.isclose(tflops, want, rel_tol=1e-5) and
          math.isclose(line["tflops_per_gpu"], want, rel_tol=1e-12), f"throughput {tflops}, metrics {line}, want {want}")
check(sorted(got.get("throughput", {})) == [2, 4, 6], "throughput at the log steps only")

# Resumed from step 6: a second file, after the first in name order, whose first step is the restart marker.
run(*common, "--train-iters", "8")
files = sorted(glob.glob(f"{tb}/events.out.tfevents.*"))
check(len(files) == 2, f"two event files, not {files}")
second = read_events(files[-1])
check(second[0].file_version == "brain.Event:2", "the resumed file's version")
check(len(second) > 1 and second[1].session_log.status == 1 and second[1].step == 7,
      f"the restart marker at step 7: {second[1] if len(second) > 1 else None}")
check(sorted(scalars(second).get("lm loss", {})) == [7, 8], f"the resumed run's steps: {scalars(second)}")
check(scalars(read_events(files[0])) == got, "the first file is untouched")

# A directory that cannot be made: one line naming the flag, before training.
open(f"{WORK}/file", "w").close()
done = run("--preset", "gpt-tiny", "--seq-length", "32", "--mock-data", "--train-iters", "2",
           "--tensorboard-dir", f"{WORK}/file/tb", want=1)
errors = [line for line in done.stderr.splitlines() if "error" in line]
check(len(errors) == 1 and f"--tensorboard-dir {WORK}/file/tb" in errors[0], f"one error line: {done.stderr}")
check("step" not in done.stdout, f"trained without its event file: {done.stdout}")

# A full disk (a 12 KiB tmpfs, where unshare may mount one): one error line, exit 1, and the file whole records
# only, the one that did not fit cut back out.
full = f"{WORK}/full"
os.makedirs(full)
script = 'mount -t tmpfs -o size=12k tmpfs "$1" || exit 99; shift; "$@"; rc=$?; cp "$0"/tb/* "$0"/../full.events; exit $rc'
done = subprocess.run(["unshare", "-m", "bash", "-c", script, full, full, TRAIN, "--preset", "gpt-tiny",
                       "--seq-length", "32", "--mock-data", "--train-iters", "300", "--tensorboard-dir", f"{full}/tb"],
                      capture_output=True, text=True) if shutil.which("unshare") else None
if done is None or done.returncode == 99 or "unshare" in done.stderr:
    print("skipped: no tmpfs can be mounted here for the full disk")
else:
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    check(done.returncode == 1 and len(errors) == 1 and "No space left on device" in errors[0],
          f"a full disk: exit {done.returncode}: {done.stderr}")
    events = read_events(f"{WORK}/full.events")
    check(len(events) > 10 and events[0].file_version == "brain.Event:2", f"{len(events)} events before the disk filled")

if failures:
    sys.exit(1)
print("ok: --tensorboard-dir: Megatron's scalars, CRCs good, a resumed run's restart marker")
