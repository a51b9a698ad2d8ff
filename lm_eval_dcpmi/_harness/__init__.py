"""The one seam to lm-eval: every use of lm-eval beyond its public names goes through here.

Each module wraps one of lm-eval's internals in a small function or class, with what
differs between the releases (0.4.12, 0.4.13, and the pre-release 0.5.0.dev1, told apart
by what lm-eval has, never by its version number) inside it, and says which lm-eval code
it mirrors. The rest of the plugin imports only lm-eval's public names (the
``lm_eval.api`` types ``Instance``, ``ConfigurableTask``, ``TaskConfig``,
``lm_eval.simple_evaluate``, ``lm_eval.tasks.TaskManager``) and this package's names;
``tests/test_harness_seam.py`` enforces it. When lm-eval changes, this package is the one
place to adapt. Private to the plugin: its names are for the plugin's own parts.

* ``_templates``: lm-eval's Jinja environment, its templates compiled once, and its
  sandboxed twin for premises.
* ``_configurable_task``: the task class, its multiple-input flag, ``gen_prefix``, the
  prompt around a premise (``prompt_with_text``), requests and their answers, the few-shot
  sampler's random generator, the task logger.
* ``_metrics``: metric and aggregation registration.
* ``_index``: the task index (a registered task's YAML and config, without building it),
  the ``TaskManager`` patch that registers the plugin's task folders, and loading tasks
  by name (an unknown name as ``UnknownTask``).
* ``_models``: model registration (where lm-eval reads no entry points), loading a model
  by name, its loglikelihoods, ``resolve_max_length``; ``_hflm``: ``HFLM``'s hooks.
* ``_model_args``: the model arguments read as lm-eval reads them.
* ``_logged``: the shape of logged samples.
* ``_requests``: a run's requests built again as lm-eval built them (``dcpmi verify``).
* ``_runs``: the request cache's folder, the results tracker, the dummy model's tokenizer,
  and a hook before each ``simple_evaluate``; ``_answer_cache``: the ``--use_cache``
  answer cache tied to its model, checked there.
* ``_servers``: lm-eval's API models (``TemplateAPI``) and a check before each
  ``evaluate`` that a served model returns prompt log-probabilities.
* ``_lm_eval_parser``: lm-eval's command-line parser, ``EvaluatorConfig`` and
  ``cli_evaluate``.

Importing this package imports nothing (its names load on first use): the start-up hook
(``lm_eval_dcpmi._autoload``) runs inside lm-eval's own imports, and each module imports
lm-eval only where it is used.
"""

from lm_eval_dcpmi._exports import lazy_exports

# public name -> the private module that defines it
_EXPORTS = {
    "check_cache_owner": "_answer_cache",
    "use_cache_files": "_answer_cache",
    "document_metrics": "_configurable_task",
    "fewshot_random": "_configurable_task",
    "gen_prefix": "_configurable_task",
    "loglikelihood_answer": "_configurable_task",
    "loglikelihood_request": "_configurable_task",
    "multiple_inputs": "_configurable_task",
    "own_metrics": "_configurable_task",
    "prompt_with_text": "_configurable_task",
    "quiet_custom_dataset_advice": "_configurable_task",
    "raw_target": "_configurable_task",
    "task_class": "_configurable_task",
    "unsupported_task_form": "_configurable_task",
    "HookedHFLM": "_hflm",
    "UnknownTask": "_index",
    "entry_yaml": "_index",
    "group_cycle": "_index",
    "indexed_entry": "_index",
    "indexed_files_with": "_index",
    "load_task_config": "_index",
    "load_tasks": "_index",
    "not_found": "_index",
    "wrap_task_manager_init": "_index",
    "cli_evaluate": "_lm_eval_parser",
    "evaluator_config": "_lm_eval_parser",
    "harness_parser": "_lm_eval_parser",
    "logged_loglikelihood": "_logged",
    "add_aggregation": "_metrics",
    "add_metric": "_metrics",
    "default_metrics": "_metrics",
    "parse_model_args": "_model_args",
    "recorded_model_args": "_model_args",
    "load_model": "_models",
    "loglikelihoods": "_models",
    "reads_plugin_entry_points": "_models",
    "register_model": "_models",
    "resolve_max_length": "_models",
    "BuildOptions": "_requests",
    "build_requests": "_requests",
    "doc_hash": "_requests",
    "hf_chat_template": "_requests",
    "text_hash": "_requests",
    "before_simple_evaluate": "_runs",
    "dummy_tokenizer_name": "_runs",
    "evaluation_tracker_class": "_runs",
    "request_cache_folder": "_runs",
    "true_doc_ids_in_logged_samples": "_runs",
    "check_servers_before_evaluate": "_servers",
    "compile_templates_once": "_templates",
    "jinja_env": "_templates",
    "sandboxed_jinja_env": "_templates",
    "template_error": "_templates",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
