#!/usr/bin/env python3
"""Prints a port P such that P and P + 1 are free on 127.0.0.1 now (MASTER_PORT and srunway's exchange beside it).

A port drawn at random without a check (30000 + RANDOM % 2000) could be one that another test of the parallel
suite held, and the two ranks then failed at once. Usage: port=$(python3 tests/free_port.py)
"""
import random
import socket

while True:
    port, held = random.randrange(20000, 32000), []
    try:
        for p in (port, port + 1):
            held.append(socket.socket())
            held[-1].bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        for s in held:
            s.close()
    print(port)
    break
