"""The one seam to lm-eval: every use of lm-eval beyond its public names goes through here.

Each module wraps one of lm-eval's internals in a small function or class, with what
differs between the releases (0.4.12, 0.4.13, and the pre-release 0.5.0.dev1, told apart
by what lm-eval has, never by its version number) inside it, and says which lm-eval code
it mirrors. The rest of the plugin imports only lm-eval's public names (the
``lm_eval.api`` types ``Instance``, ``ConfigurableTask``, ``TaskConfig``,
``lm_eval.simple_evaluate``, ``lm_eval.tasks.TaskManager``); ``tests/test_harness_seam.py``
enforces it. When lm-eval changes, this package is the one place to adapt.

* ``templates``: lm-eval's Jinja environment.
* ``configurable_task``: the task class, its multiple-input flag, ``gen_prefix``, the
  prompt around a premise (``prompt_with_text``), requests and their answers, the few-shot
  sampler's random generator, the task logger.
* ``metrics``: metric and aggregation registration.
* ``index``: the task index (a registered task's YAML and config, without building it),
  the ``TaskManager`` patch that registers the plugin's task folders, and loading tasks
  by name (an unknown name as ``UnknownTask``).
* ``models``: model registration, loading a model by name, its loglikelihoods,
  ``resolve_max_length``; ``hflm``: ``HFLM``'s hooks.
* ``logged``: the shape of logged samples.
* ``requests``: a run's requests built again as lm-eval built them (``dcpmi verify``).
* ``runs``: the request cache's folder, the results tracker, the dummy model's tokenizer,
  and a check before each ``simple_evaluate`` (the answer cache's owner).
* ``servers``: lm-eval's API models (``TemplateAPI``) and a check before each
  ``evaluate`` that a served model returns prompt log-probabilities.
* ``lm_eval_parser``: lm-eval's command-line parser, ``EvaluatorConfig`` and
  ``cli_evaluate``.

This package's ``__init__`` imports nothing: ``_autoload`` runs inside lm-eval's own
imports, and each module imports lm-eval only where it is used.
"""
