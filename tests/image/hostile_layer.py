#!/usr/bin/env python3
"""Writes one crafted layer tar for tests/image/pull_test.sh (pushed with push-image --tar).

usage: hostile_layer.py NAME OUT KERNEL OUTSIDE

NAME picks a layer from LAYERS below. KERNEL is the kernel release of the kept path
opt/lib/modules/KERNEL/. OUTSIDE is a directory outside the image cache that a hostile
entry aims at: the cache's trees live at OUTSIDE/../cache/trees/<tree>/, so from a link in
opt/lib/modules/KERNEL/ "../" seven times reaches OUTSIDE's parent.

Every layer starts with a well-formed kept file, so that the staging directory has content
when the hostile entry is met. The tar is written by Python's tarfile without the
normalisation tar.add() does: names and link targets go into the archive as given.
"""
import io
import os
import sys
import tarfile


def main():
    name, out, kernel, outside = sys.argv[1:5]
    kept = f"opt/lib/modules/{kernel}"
    up7 = "../" * 7  # from a link in kept/ to the directory holding the cache and OUTSIDE

    def f(path, data=b"\x7fELF fake module\n", mode=0o644):
        return ("file", path, data, mode)

    def d(path, mode=0o755):
        return ("dir", path, None, mode)

    def sym(path, target):
        return ("sym", path, target, 0o777)

    def hard(path, target):
        return ("hard", path, target, 0o644)

    def dev(path, kind):
        return (kind, path, None, 0o644)

    legit = [d("opt"), d("opt/lib"), d("opt/lib/modules"), d(kept), f(f"{kept}/kmm_ci_a.ko")]
    layers = {
        # Paths that leave the root.
        "dotdot": [f(f"{kept}/{up7}outside/kmodd-pwned")],
        "absolute": [f(f"/{kept}/abs.ko")],
        "absolute-outside": [f(f"{outside}/kmodd-pwned")],
        # Symlinks that leave the root, each followed by a write through it.
        "symlink-etc": [sym(f"{kept}/evil", "/etc"), f(f"{kept}/evil/kmodd-test-pwned")],
        "symlink-abs-outside": [sym(f"{kept}/evil", outside), f(f"{kept}/evil/kmodd-pwned")],
        "symlink-climb": [sym(f"{kept}/evil", "../../../../../..")],
        "symlink-climb-outside": [sym(f"{kept}/evil", f"{up7}outside"),
                                  f(f"{kept}/evil/kmodd-pwned")],
        "symlink-name-then-climb": [sym(f"{kept}/evil", f"extra/{up7}outside")],
        # Only lib/modules/<kernel>/{build,source} are dropped; the same name deeper is not.
        "symlink-deep-build": [sym(f"{kept}/extra/build", "/usr/src/linux-headers-" + kernel)],
        # Hardlinks to what is not a file already extracted.
        "hardlink-etc-passwd": [hard(f"{kept}/passwd", "/etc/passwd")],
        "hardlink-climb-outside": [hard(f"{kept}/canary", f"{kept}/{up7}outside/canary")],
        "hardlink-dropped": [f("usr/bin/tool"), hard(f"{kept}/tool", "usr/bin/tool")],
        # A legal symlink (it stays in the root) and a file written through it.
        "write-through-symlink": [sym(f"{kept}/d", "../../../../tmp/x"), f(f"{kept}/d/f")],
        "write-through-symlink-dir": [d(f"{kept}/extra"), sym(f"{kept}/d", "extra"),
                                      f(f"{kept}/d/f")],
        # Entry types and modes that have no business in a driver tree.
        "char-device": [dev(f"{kept}/null", "chr")],
        "block-device": [dev(f"{kept}/sda", "blk")],
        "fifo": [dev(f"{kept}/fifo", "fifo")],
        "setuid": [f(f"{kept}/suid.ko", mode=0o4755)],
        "setgid": [f(f"{kept}/sgid.ko", mode=0o2755)],
        # Accepted: the same things outside the kept paths are dropped, never created, and a
        # symlink on a directory enclosing the kept path is dropped, not followed.
        "dropped-entries": [
            sym("usr/lib/modules", outside), dev("dev/null", "chr"), dev("dev/sda", "blk"),
            dev("run/fifo", "fifo"), f("usr/bin/su", mode=0o4755), hard("usr/bin/passwd", "/etc/passwd"),
            sym("opt/lib/modules/other", "/etc")],
        # (A non-directory replacing a directory removes what was kept beneath it: the legit
        # kmm_ci_a.ko goes with "opt".)
        "parent-symlink": [sym("opt", outside), sym("opt/lib", outside), f(f"{kept}/extra/x.ko")],
        # lib/modules/<kernel>/{build,source} leaving the root: dropped, the rest kept.
        "kernel-links": [sym(f"{kept}/build", f"/usr/src/linux-headers-{kernel}"),
                         sym(f"{kept}/source", "../../../../../../usr/src/linux-source"),
                         f(f"{kept}/extra/x.ko")],
    }
    # Accepted, within the applier's memory bound: directories as deep (127 components) and
    # long (~3.9 KiB) as the limits allow, each named apart so that no prefix repeats, each
    # replaced at once by a file (which removes it, so the disk stays small). A writer that
    # remembered every prefix of every path held ~240 KB per round.
    deep = []
    for i in range(20):
        top = f"{kept}/r{i}"
        path = top
        while path.count("/") + 1 < 127 and len(path) + 31 <= 4096:
            path += "/" + chr(ord("a") + i % 26) * 30
        deep += [d(path), f(top, b"")]
    layers["deep-paths"] = deep
    if name not in layers:
        sys.exit(f"hostile_layer.py: unknown layer {name!r} (have: {', '.join(layers)})")
    entries = legit + layers[name]

    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for kind, path, arg, mode in entries:
            info = tarfile.TarInfo(path)
            info.mode = mode
            info.uid = info.gid = 0
            info.mtime = 1700000000
            data = None
            if kind == "file":
                info.type, info.size, data = tarfile.REGTYPE, len(arg), io.BytesIO(arg)
            elif kind == "dir":
                info.type = tarfile.DIRTYPE
            elif kind == "sym":
                info.type, info.linkname = tarfile.SYMTYPE, arg
            elif kind == "hard":
                info.type, info.linkname = tarfile.LNKTYPE, arg
            elif kind == "chr":
                info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
            elif kind == "blk":
                info.type, info.devmajor, info.devminor = tarfile.BLKTYPE, 8, 0
            elif kind == "fifo":
                info.type = tarfile.FIFOTYPE
            tar.addfile(info, data)
    # tarfile keeps names as given; make sure it did (a leading "/" would be stripped by add()).
    with tarfile.open(out) as tar:
        names = tar.getnames()
    want = [e[1] for e in entries]
    if names != want:
        sys.exit(f"hostile_layer.py: tarfile rewrote names: {names} != {want}")


if __name__ == "__main__":
    main()
