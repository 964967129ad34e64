"""Templates: plain layouts from the article, chat templates, Qwen3 thinking on/off, TRL-identical ids."""
from __future__ import annotations

import pytest

from grpokit.templates import PLAIN_EN, PLAIN_ZH, PromptTemplate


def test_plain_zh_is_the_articles_fixed_template():
    text = PromptTemplate("plain_zh").build("一根绳子对折两次后每段长12米，原来长多少米？")
    assert text.startswith("### 指令\n请解决下面的问题。")
    assert "最终答案：XXXX" in text
    assert text.endswith("### 问题\n一根绳子对折两次后每段长12米，原来长多少米？\n\n### 回答\n")


def test_plain_en_mirrors_it_in_english():
    text = PromptTemplate("plain_en").build("What is 2 + 3?")
    assert text == PLAIN_EN.format(question="What is 2 + 3?")
    assert "Final answer: XXXX" in text and text.endswith("### Answer\n")


def test_plain_prompt_ids_are_the_tokenizer_ids(tokenizer):
    t = PromptTemplate("plain_zh")
    prompt = t.build("1+1?")
    assert t.encode(tokenizer, prompt) == tokenizer(prompt)["input_ids"]
    assert PLAIN_ZH.count("{question}") == 1


def test_chat_template_with_system_prompt(tokenizer):
    t = PromptTemplate("chat", system_prompt="Be brief.")
    msgs = t.build("What is 2 + 3?")
    assert msgs == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 3?"}]
    text = t.render(tokenizer, msgs)
    assert "<|im_start|>system\nBe brief.<|im_end|>" in text and text.endswith("<|im_start|>assistant\n")
    # encode() equals what TRL's GRPOTrainer computes for a conversational prompt.
    expected = tokenizer.apply_chat_template([msgs], add_generation_prompt=True, tokenize=True, return_dict=True)
    assert t.encode(tokenizer, msgs) == list(expected["input_ids"][0])


@pytest.mark.parametrize("thinking,expect_empty_think", [(True, False), (False, True), (None, False)])
def test_qwen3_enable_thinking_passes_through(tiny_qwen3_dir, thinking, expect_empty_think):
    from grpokit.models import load_tokenizer

    tok = load_tokenizer(str(tiny_qwen3_dir))
    t = PromptTemplate("chat", enable_thinking=thinking)
    text = t.render(tok, t.build("2+3?"))
    assert text.endswith("<think>\n\n</think>\n\n") == expect_empty_think
    assert t.chat_template_kwargs() == ({} if thinking is None else {"enable_thinking": thinking})
    assert tok.decode(t.encode(tok, t.build("2+3?"))) == text


def test_left_padding_for_generation(tokenizer):
    assert tokenizer.padding_side == "left" and tokenizer.pad_token is not None


def test_unknown_template_is_refused():
    with pytest.raises(ValueError, match="plain_zh, plain_en, chat"):
        PromptTemplate("alpaca")
