"""The lm-eval glue: the DC-PMI task class (``task``), how its requests are laid out
(``layout``), its reference contexts (``references``), what it keeps per document
(``documents``), token counts (``tokens``), ``base_task:`` derivation (``derive``) and the
``+premise.<digest>`` version rule (``premise_digest``). The YAMLs name the class as
``lm_eval_dcpmi.task.DCPMITask`` (a re-export)."""
