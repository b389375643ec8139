"""Loading what a run is made of: models (the built-in tiny model, hub access, the Unsloth / TRL + vLLM / plain
paths, chat templates) and data (built-in tasks, GSM8K, local files)."""
