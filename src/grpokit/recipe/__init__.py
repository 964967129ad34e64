"""The recipe: a typed YAML description of one GRPO experiment, validated before any model loads.

    recipe = load_recipe("recipes/smollm2-arithmetic.yaml", ["train.max_steps=20"])
    args = grpo_args(recipe, run_dir)          # the recipe's translation to TRL's GRPOConfig

schema (the sections), section (their base), health_section / generation_section / selection_section,
yaml_io (reading the file), load (load_recipe, load_run_recipe), checks (what training will build, built
now), trl_args (GRPOConfig, the batch geometry and the prompt dataset).
"""
from grpokit.recipe.generation_section import GenerationConfig
from grpokit.recipe.health_section import HEALTH_CODES, HealthActions, HealthConfig
from grpokit.recipe.load import load_recipe, load_run_recipe, validate_raw
from grpokit.recipe.machine import check_generation_machine, native_bf16, refuse_vllm_training_here, sampler_dtype_of
from grpokit.recipe.schema import LoraConfig, Recipe, RewardConfig
from grpokit.recipe.section import Section
from grpokit.recipe.selection_section import SelectionConfig
from grpokit.recipe.trl_args import BatchGeometry, batch_geometry, bf16_of, build_prompt_dataset, grpo_args

__all__ = ["HEALTH_CODES", "BatchGeometry", "GenerationConfig", "HealthActions", "HealthConfig", "LoraConfig", "Recipe",
           "RewardConfig", "Section", "SelectionConfig", "batch_geometry", "bf16_of", "build_prompt_dataset",
           "check_generation_machine", "grpo_args", "load_recipe", "load_run_recipe", "native_bf16",
           "refuse_vllm_training_here", "sampler_dtype_of", "validate_raw"]
