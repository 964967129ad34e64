"""`grpokit doctor`: diagnose a run from its logs, offline."""
from __future__ import annotations

import json
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("doctor", help="diagnose a run from its metrics.jsonl and samples.jsonl")
    p.add_argument("run_dir", help="a grpokit run directory")
    p.add_argument("--json", action="store_true", help="print a JSON list of findings ([] when healthy)")
    p.set_defaults(func=cmd_doctor)


def cmd_doctor(args) -> int:
    from grpokit.cli.output import require_run
    from grpokit.health import actions_taken, doctor_run

    require_run(args.run_dir, "doctor")  # "no health findings" about a folder with no logs would be a false all-clear
    findings = doctor_run(Path(args.run_dir))
    if args.json:
        print(json.dumps([f.as_dict() for f in findings], indent=2, ensure_ascii=False))
        return 0
    for h in actions_taken(Path(args.run_dir)):
        print(f"during training, step {h.get('step')}: {h.get('code')} -> {h.get('action')}")
    if not findings:
        print(f"{args.run_dir}: no health findings")
        return 0
    for f in findings:
        print(f"step {f.step:>5}  {f.severity:<7}  {f.code}\n    {f.message}\n    evidence: "
              f"{json.dumps(f.as_dict()['evidence'], ensure_ascii=False)}")
    print(f"{len(findings)} finding(s)")
    return 0
