"""The rows bundled with grpokit (`builtin:<path>` in a recipe or a command): arithmetic problems, tool tasks
with their repofix projects, preference prompts. This folder's location is the one fact this module holds.

Kept at src/grpokit/datasets/ rather than under data/: run directories written before the layout change
name these files by absolute path in their config.yaml.
"""
from pathlib import Path

BUILTIN_DATA = Path(__file__).resolve().parent
