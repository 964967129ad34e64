"""`grpokit sandbox check`: which isolation code rewards get on this machine."""
from __future__ import annotations

from grpokit.sandbox import probe


def register(sub) -> None:
    p = sub.add_parser("sandbox", help="the isolated runner for code rewards")
    actions = p.add_subparsers(dest="sandbox_command", required=True, metavar="ACTION")
    c = actions.add_parser("check", help="say which isolation is available here and try it (exit 1 if none)")
    c.set_defaults(func=cmd_check)


def cmd_check(args=None) -> int:
    iso, r = probe()
    if r is not None:
        print(f"isolation: bwrap — {iso.detail}")
        print(f"probe run: {'passed' if r.all_passed else 'FAILED: ' + (r.error or str(r.failed_tests))} "
              f"in {r.duration_s:.2f} s")
        return 0 if r.all_passed else 1
    print(f"isolation: none — {iso.detail}")
    if iso.fix:
        print(f"fix: {iso.fix}")
    print("code rewards refuse to run unless the recipe sets `params: {sandbox: unsafe}` (no isolation).")
    return 1
