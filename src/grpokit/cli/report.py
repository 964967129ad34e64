"""`grpokit report`: report.html with plots for a run."""
from __future__ import annotations

from grpokit.errors import GrpokitError, Problem
from grpokit.run import REPORT_DIR
from grpokit.run.record import read_record


def register(sub) -> None:
    p = sub.add_parser("report", help="write report.html with plots for a run (offline; run grpokit eval first), or "
                       "for an SFT-vs-GRPO comparison's folder")
    p.add_argument("run_dir", help="a grpokit run directory, or a comparison's (grpokit demo --task sft-vs-grpo)")
    p.add_argument("--output-dir", help=f"where report.html and its PNGs go (default RUN_DIR/{REPORT_DIR})")
    p.set_defaults(func=cmd_report)


def cmd_report(args) -> int:
    from grpokit.cli.output import require_run
    from grpokit.report import write_report
    if (read_record(args.run_dir) or {}).get("kind") == "comparison":  # its page sits beside its comparison.json
        from grpokit.report.comparison import write_comparison_report

        if args.output_dir:
            raise GrpokitError([Problem("--output-dir", "a comparison's page is written into its own folder",
                                        f"run `grpokit report {args.run_dir}` without --output-dir")])
        print(f"report: {write_comparison_report(args.run_dir)}")
        return 0
    require_run(args.run_dir, "report")  # an empty report of a folder that is no run would read as a real one
    path = write_report(args.run_dir, args.output_dir)
    print(f"report: {path}")
    return 0
