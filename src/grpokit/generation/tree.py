"""Every distinct token prefix computed once: sequences that share a prefix packed as one tree, for one forward pass.

    trees = pack([prompt + completion for ...], scored_from=[len(prompt), ...], cost=TreeCost.of(model))
    for tree in trees:
        out = model(**tree.inputs(mask_form(model)), fused_lm_head=True)   # TRL's fused head reads shift_labels
        out.log_probs[0, tree.scored[row]]                                  # row's scored tokens, in order

A GRPO step lays its rows out as TRL does: one row per completion, the prompt repeated before each (8 times for a
group of 8) and every completion padded to the longest. In the tree, a token is one position whatever number of
rows share the prefix it ends, so a group's prompt is computed once and a completion only to its own length;
prompts that share a system prompt or a tool block share that too, and so do completions that begin alike.

Why the result is exact (not an approximation): a causal model's output at a position depends only on the tokens
before it and their positions. Each position of the tree attends to its ancestors and itself (a 4-D mask) and
carries its depth as position id, so it sees exactly what it sees in its own row: its log-prob is the row's up to
float rounding (tests/test_tree.py; docs/measurements.md "Every token once"). With rotary position embeddings the
depth and TRL's left-padded positions differ by a constant per row, which rotary attention does not see.

A position scores the token that follows it (`labels`, the shifted labels TRL's fused head reads). Where one
position is followed by several scored tokens (the prompt's last token before each of 8 completions), each
further one gets an *anchor*: a copy of that position (same token, depth and ancestors), so the same hidden state
is scored against another token. Anchors are the only positions added; everything else is computed once.

How rows are split into trees: one tree costs a per position (the weights) and b per pair of positions (attention
over a dense mask computes every pair, masked or not), `TreeCost`. Rows are added in sorted order (so rows that
share a prefix follow each other) to the current tree while that is cheaper than starting a new one: small steps
put everything in one tree, GPU-sized groups (64 completions x 256 tokens) split into trees of a few thousand
positions so attention stays a minor cost.

Which models take it (`refusal`): attention through eager or SDPA (which read a 4-D mask as given; flash-attention
has no such mask), rotary position embeddings, no sliding-window layers shorter than the rows. Anything else is
computed in TRL's padded layout, and the caller says why (grpokit.training.logps, grpokit.generation.decode).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from grpokit import hf_internals

IGNORE = -100  # the label of a position whose output is not scored (transformers' and TRL's convention)
TREE_ATTENTION = ("eager", "sdpa")  # attention implementations that take a 4-D mask as given
# Masked SDPA's multiply-adds ran at this share of the linear layers' rate (the embedded model on the CPU, forward and
# backward of a tree: docs/measurements.md "Every token once"); it makes long trees split sooner.
ATTENTION_EFFICIENCY = 0.74


@dataclass
class Tree:
    """One packed sequence: tokens with their depth (position id), parent (-1: a root) and label."""

    tokens: list[int] = field(default_factory=list)
    depths: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)  # the caller's row indices packed here
    paths: dict[int, list[int]] = field(default_factory=dict)  # row -> the position of each of its tokens
    scored: dict[int, list[int]] = field(default_factory=dict)  # row -> the positions scoring its scored tokens
    _children: list[dict[int, int]] = field(default_factory=list)
    _roots: dict[int, int] = field(default_factory=dict)
    _anchors: dict[tuple[int, int], int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.tokens)

    def cost_to_add(self, ids: Sequence[int], scored: int | Sequence[bool]) -> int:
        """Positions `add` would create for `ids`: its tokens past the prefix already here, and the anchors its
        scored tokens need (what sharing saves is the rest)."""
        flags = scored_flags(scored, len(ids))
        node, added = -1, 0
        for i, token in enumerate(ids):
            if flags[i] and node >= 0 and self._needs_anchor(node, token):
                added += 1
            child = (self._roots if node < 0 else self._children[node]).get(token)
            if child is None:
                return added + len(ids) - i
            node = child
        return added

    def _needs_anchor(self, node: int, token: int) -> bool:
        return self.labels[node] not in (IGNORE, token) and (node, int(token)) not in self._anchors

    def add(self, row: int, ids: Sequence[int], scored: int | Sequence[bool]) -> None:
        """Insert row `row`: its tokens, and for each scored token (every token from index `scored` on, or those
        flagged True; never the first) the position that scores it, in order."""
        flags = scored_flags(scored, len(ids))
        node, path, scorers = -1, [], []
        for i, token in enumerate(ids):
            if flags[i] and node >= 0:
                scorers.append(self._scorer(node, token))
            kids = self._roots if node < 0 else self._children[node]
            child = kids.get(token)
            if child is None:
                child = self._new(token, i, node)
                kids[token] = child
            node = child
            path.append(node)
        self.rows.append(row)
        self.paths[row], self.scored[row] = path, scorers

    def _new(self, token: int, depth: int, parent: int) -> int:
        self.tokens.append(int(token))
        self.depths.append(depth)
        self.parents.append(parent)
        self.labels.append(IGNORE)
        self._children.append({})
        return len(self.tokens) - 1

    def _scorer(self, node: int, token: int) -> int:
        """The position whose output scores `token` after `node`: the node itself, or an anchor (a copy of it with
        the same ancestors) when the node already scores another token."""
        if self.labels[node] in (IGNORE, token):
            self.labels[node] = int(token)
            return node
        key = (node, int(token))
        if key not in self._anchors:  # nothing grows from an anchor: later tokens hang on the node itself
            anchor = self._new(self.tokens[node], self.depths[node], self.parents[node])
            self.labels[anchor] = int(token)
            self._anchors[key] = anchor
        return self._anchors[key]

    def ancestry(self):
        """(L, L) bool: position i sees position j (j is i or an ancestor of i)."""
        import torch

        n = len(self.tokens)
        seen = torch.zeros(n, n, dtype=torch.bool)
        for i, parent in enumerate(self.parents):  # parents come before their children
            if parent >= 0:
                seen[i] = seen[parent]
            seen[i, i] = True
        return seen

    def inputs(self, form: str, device=None, dtype=None) -> dict:
        """The model's keyword arguments for this tree: input_ids, position_ids, a (1, 1, L, L) attention mask in
        `form` ("bool": SDPA's; "additive": eager's, 0 or the dtype's minimum) and shift_labels."""
        import torch

        seen = self.ancestry().to(device)
        if form == "additive":
            mask = torch.zeros(seen.shape, dtype=dtype, device=device).masked_fill(~seen, torch.finfo(dtype).min)
        else:
            mask = seen
        as_row = lambda xs: torch.tensor([xs], dtype=torch.long, device=device)
        return {"input_ids": as_row(self.tokens), "position_ids": as_row(self.depths),
                "attention_mask": mask[None, None], "shift_labels": as_row(self.labels)}


@dataclass(frozen=True)
class TreeCost:
    """What one forward pass over a tree of L positions costs, in multiply-adds: per_position * L + per_pair * L^2
    (the weights at every position; attention over the dense mask at every pair: QK and AV, 2 x heads x head_dim
    a layer, divided by ATTENTION_EFFICIENCY). Only the ratio matters."""

    per_position: float
    per_pair: float

    @classmethod
    def of(cls, model) -> TreeCost:
        config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        layers = int(getattr(config, "num_hidden_layers", 1) or 1)
        heads = int(getattr(config, "num_attention_heads", 1) or 1)
        width = int(getattr(config, "head_dim", None) or getattr(config, "hidden_size", 64) // heads)
        embeddings = sum(m.weight.numel() for m in (model.get_input_embeddings(),) if m is not None)
        weights = max(1, sum(p.numel() for p in model.parameters()) - embeddings)
        return cls(per_position=float(weights), per_pair=2.0 * layers * heads * width / ATTENTION_EFFICIENCY)

    def of_tree(self, positions: int) -> float:
        return self.per_position * positions + self.per_pair * positions * positions


def scored_flags(scored: int | Sequence[bool], n: int) -> list[bool]:
    """Which of n tokens are scored: every token from index `scored` on, or the given flags (the first never is:
    nothing before it predicts it)."""
    flags = [i >= scored for i in range(n)] if isinstance(scored, int) else [bool(f) for f in scored]
    return [False, *flags[1:]] if flags else flags


def pack(sequences: Sequence[Sequence[int]], scored_from: Sequence, cost: TreeCost | None = None) -> list[Tree]:
    """The trees that compute `sequences` (token ids; each row's scored tokens: from index `scored_from[r]` on, or
    its flags), rows in sorted order so shared prefixes meet. Rows with the same prompt (the tokens before the first
    scored one) form a group; with a `cost`, a group goes into as many trees as make it cheapest (its prompt in each:
    a long group's attention over one dense mask would cost more than computing the prompt again), and a group joins
    the previous group's tree when sharing a prefix with it saves more than the longer tree's attention costs.
    Without a cost everything is one tree."""
    order = sorted(range(len(sequences)), key=lambda r: list(sequences[r]))
    trees: list[Tree] = []
    for group in _groups(order, sequences, scored_from):
        parts = _split(group, sequences, scored_from, cost)
        for i, part in enumerate(parts):
            if not trees or (cost is not None and not (i == 0 and _joins(trees[-1], part, sequences, scored_from,
                                                                         cost))):
                trees.append(Tree())
            for row in part:
                trees[-1].add(row, sequences[row], scored_from[row])
    return trees


def _prompt(ids: Sequence[int], scored) -> tuple[int, ...]:
    flags = scored_flags(scored, len(ids))
    return tuple(ids[:next((i for i, f in enumerate(flags) if f), len(ids))])


def _groups(order, sequences, scored_from) -> list[list[int]]:
    groups: list[list[int]] = []
    last = None
    for row in order:
        prompt = _prompt(sequences[row], scored_from[row])
        if prompt != last:
            groups.append([])
            last = prompt
        groups[-1].append(row)
    return groups


def _alone(rows, sequences, scored_from) -> int:
    tree = Tree()
    for row in rows:
        tree.add(row, sequences[row], scored_from[row])
    return len(tree)


def _split(group: list[int], sequences, scored_from, cost: TreeCost | None) -> list[list[int]]:
    """The group's rows in k consecutive parts, k the cheapest by `cost` (1 without one)."""
    if cost is None or len(group) == 1:
        return [group]
    best, best_cost = [group], cost.of_tree(_alone(group, sequences, scored_from))
    for k in range(2, len(group) + 1):
        size = -(-len(group) // k)
        parts = [group[i:i + size] for i in range(0, len(group), size)]
        total = sum(cost.of_tree(_alone(part, sequences, scored_from)) for part in parts)
        if total < best_cost:
            best, best_cost = parts, total
        elif total > best_cost * 1.5:  # the costs grow past the best once the prompt repeats too often
            break
    return best


def _joins(tree: Tree, part: list[int], sequences, scored_from, cost: TreeCost) -> bool:
    """Whether adding `part` to `tree` costs less than computing it in a tree of its own."""
    alone = _alone(part, sequences, scored_from)
    added = tree.cost_to_add(sequences[part[0]], scored_from[part[0]])
    added += alone - len(sequences[part[0]])  # the part's other rows share its first row's prompt
    here = len(tree)
    return cost.of_tree(here + added) - cost.of_tree(here) < cost.of_tree(alone)


def positions(trees: Sequence[Tree]) -> int:
    return sum(len(t) for t in trees)


def refusal(model, longest: int | None = None) -> str | None:
    """Why `model` cannot compute a tree exactly (None: it can). `longest`: the longest row, against a sliding
    attention window."""
    implementation = hf_internals.attention_implementation(model)
    if implementation not in TREE_ATTENTION:
        return (f"attention implementation {implementation!r} takes no 4-D mask (the tree layout needs "
                f"{' or '.join(TREE_ATTENTION)})")
    if not hf_internals.has_rotary_positions(model):
        return "no rotary position embeddings: positions would not match TRL's left-padded layout"
    window = hf_internals.sliding_window(model)
    if window is not None and (longest is None or longest > window):
        return f"sliding-window attention ({window} tokens) shorter than the rows"
    return None


def mask_form(model) -> str:
    """The 4-D mask the model's attention reads: SDPA a boolean one, eager an additive one."""
    return "bool" if hf_internals.attention_implementation(model) == "sdpa" else "additive"
