"""Moved to aiayn.config.experiment (the one experiment loader); kept as an alias until every
import names the new path."""

from __future__ import annotations

from aiayn.config.experiment import (
    CONFIG_DIR,
    SECTIONS,
    ConfigSource,
    Experiment,
    Source,
    apply_overrides,
    build_model_config,
    builtin_configs,
    config_task,
    describe_config,
    experiment_from_dict,
    load_experiment,
    parse_value,
    read_config_file,
    read_source,
    recipe,
    recipe_train,
    require_out,
)

__all__ = ["CONFIG_DIR", "SECTIONS", "ConfigSource", "Experiment", "Source", "apply_overrides",
           "build_model_config", "builtin_configs", "config_task", "describe_config",
           "experiment_from_dict", "load_experiment", "parse_value", "read_config_file",
           "read_source", "recipe", "recipe_train", "require_out"]
