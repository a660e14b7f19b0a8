#!/usr/bin/env python3
"""The agent of the art run crash tests.

Writes files in DIR the way tools do and prints, flushed, one BEGIN line
before and one ACK line after each operation whose close()/fsync()
returned: what the ACK lines name must survive a kill -9 of art.

    agent.py SEED DIR [OPS]   (OPS 0 or absent: until killed)
"""
import hashlib
import os
import random
import sys


def sha(b):
    return hashlib.sha256(b).hexdigest()


def payload(rnd):
    n = rnd.choice([0, 1, 511, 4096, 65535, 65536, 65537, 200000, 1 << 20]) + rnd.randrange(3000)
    if rnd.randrange(3) == 0:
        return bytes(rnd.choice(b"abcdefgh \n") for _ in range(n))
    return rnd.randbytes(n)


def fsync_dir(d):
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def main():
    seed, out = int(sys.argv[1]), sys.argv[2]
    limit = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    rnd = random.Random(seed)
    os.makedirs(out, exist_ok=True)
    say = lambda *f: print(*f, flush=True)
    live, log, i = [], bytearray(), 0
    while limit == 0 or i < limit:
        r = rnd.randrange(100)
        if r < 55 or not live:
            name = f"{out}/f{i:05d}"
            data = payload(rnd)
            say("BEGIN", "file", name)
            with open(name, "wb") as f:
                for k in range(0, len(data), 100000):
                    f.write(data[k:k + 100000])
                if rnd.randrange(2):
                    f.flush()
                    os.fsync(f.fileno())
            say("ACK", "file", name, sha(data))
            live.append(name)
        elif r < 70:
            target, tmp = rnd.choice(live), f"{out}/.tmp{i:05d}"
            data = payload(rnd)
            say("BEGIN", "replace", target, tmp)
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.rename(tmp, target)
            fsync_dir(out)
            say("ACK", "file", target, sha(data))
        elif r < 85:
            rec = f"record {len(log)} {rnd.getrandbits(64):x}\n".encode()
            say("BEGIN", "log", f"{out}/log")
            with open(f"{out}/log", "ab") as f:
                f.write(rec)
                f.flush()
                os.fsync(f.fileno())
            log += rec
            say("ACK", "log", f"{out}/log", len(log), sha(bytes(log)))
        else:
            target = live.pop(rnd.randrange(len(live)))
            say("BEGIN", "gone", target)
            os.unlink(target)
            fsync_dir(out)
            say("ACK", "gone", target)
        i += 1
    say("END", i)


if __name__ == "__main__":
    main()
