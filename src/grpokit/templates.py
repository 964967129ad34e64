"""Prompt templates: how a question becomes the exact token ids the model sees.

- `plain_zh`: the fixed plain-text template of the Qwen3-0.6B-Base article
  (`### 指令` … `最终答案：XXXX` … `### 问题` {question} `### 回答`). For base
  models, which follow a fixed text layout better than a chat template.
- `plain_en`: the same layout in English, answer line `Final answer: XXXX`.
- `chat`: the tokenizer's own chat template, an optional system prompt, and
  Qwen3's `enable_thinking` passed through.

A question is a string, or already a conversation (TRL's conversational
format: a list of `{role, content}` messages). The chat template uses a
conversation as given; the recipe's system prompt is put first only when the
conversation does not start with a system message of its own (the row's own
instructions win, a row never gets two, and the exported chat template
applies the same rule; data checks allow a system message only first).
Plain templates render a question string only: `grpokit data check
--template` and training refuse message lists for them before this point.

A template produces the dataset's `prompt` column in the form TRL expects (a
string for plain templates, a message list for chat) and `encode()`
reproduces TRL's own tokenisation of that prompt, so evaluation and export
see exactly the ids training saw. Generation pads on the left.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PLAIN_ZH = (
    "### 指令\n请解决下面的问题。先给出逐步推理过程，最后以单独一行输出“最终答案：XXXX”。\n\n"
    "### 问题\n{question}\n\n### 回答\n"
)
PLAIN_EN = (
    "### Instruction\nSolve the problem below. First reason step by step, then write the final answer "
    "on a line of its own as \"Final answer: XXXX\".\n\n### Question\n{question}\n\n### Answer\n"
)
PLAIN_TEMPLATES = {"plain_zh": PLAIN_ZH, "plain_en": PLAIN_EN}
TEMPLATE_NAMES = ("plain_zh", "plain_en", "chat")


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    system_prompt: str | None = None
    enable_thinking: bool | None = None

    def __post_init__(self):
        if self.name not in TEMPLATE_NAMES:
            raise ValueError(f"unknown template {self.name!r}; valid: {', '.join(TEMPLATE_NAMES)}")

    @property
    def is_chat(self) -> bool:
        return self.name == "chat"

    def chat_template_kwargs(self) -> dict[str, Any]:
        """Extra variables for the chat template (TRL's GRPOConfig.chat_template_kwargs)."""
        return {} if self.enable_thinking is None else {"enable_thinking": self.enable_thinking}

    def build(self, question: str | list[dict]) -> str | list[dict[str, str]]:
        """The `prompt` column value for one question (a string, or a conversation for the chat template)."""
        if not self.is_chat:
            if not isinstance(question, str):
                raise ValueError(f"the {self.name} template renders a question string, not a list of messages; "
                                 "use template: chat")
            return PLAIN_TEMPLATES[self.name].format(question=question)
        given = [dict(m) for m in question] if isinstance(question, list) else [{"role": "user", "content": question}]
        if self.system_prompt and given[0].get("role") != "system":  # the rule the exported chat template applies
            given.insert(0, {"role": "system", "content": self.system_prompt})
        return given

    def render(self, tokenizer, prompt: str | list[dict]) -> str:
        """The prompt as text, exactly as the model sees it."""
        if isinstance(prompt, str):
            return prompt
        return tokenizer.apply_chat_template(
            prompt, tokenize=False, add_generation_prompt=True, **self.chat_template_kwargs()
        )

    def encode(self, tokenizer, prompt: str | list[dict], tools: list | None = None) -> list[int]:
        """Token ids of the prompt, the way TRL's GRPOTrainer tokenises it; `tools`: the tool schemas a tool
        episode's prompt carries (grpokit.envs.training_tools), rendered into the system turn by the template."""
        if isinstance(prompt, str):
            return list(tokenizer(text=prompt)["input_ids"])
        out = tokenizer.apply_chat_template(
            prompt, tools=tools or None, tokenize=True, add_generation_prompt=True, return_dict=True,
            **self.chat_template_kwargs()
        )
        ids = out["input_ids"]
        return list(ids[0] if ids and isinstance(ids[0], list) else ids)


def prepare_tokenizer(tokenizer):
    """Left padding for batched generation; a pad token if the model has none."""
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer
