"""Export: merged weights, GGUF, an Ollama Modelfile and the vLLM command, each checked against training.

    export("runs/smollm2-arithmetic", checkpoint="best", to="ollama", quant="q4_k_m")

export (the pipeline), gguf (conversion and loading back), checks (prompt ids, generations, loadability), quantize (llama.cpp),
serving / serving_tools / gotemplate (the served chat template), hub (push to the Hugging Face hub).
"""
from grpokit.export.checks import agreement, greedy
from grpokit.export.export import CHECK_PROMPTS, TARGETS, export
from grpokit.export.gguf import convert_gguf, load_gguf
from grpokit.export.hub import check_repo_id, hub_token, push_to_hub
from grpokit.export.quantize import LLAMA_QUANTS, QUANTS, quantize_gguf

__all__ = ["CHECK_PROMPTS", "LLAMA_QUANTS", "QUANTS", "TARGETS", "agreement", "check_repo_id", "convert_gguf",
           "export", "greedy", "hub_token", "load_gguf", "push_to_hub", "quantize_gguf"]
