"""``HookedHFLM``: lm-eval's ``HFLM`` (``lm_eval/models/huggingface.py``) with the private
methods a subclass needs under names of the plugin's, so that the subclass (``hf_prefix``'s
``PrefixHFLM``) uses ``HFLM``'s public attributes and these methods only."""

from __future__ import annotations

from typing import Any

from lm_eval.models.huggingface import HFLM


class HookedHFLM(HFLM):
    """``HFLM`` whose token-level loglikelihood scoring a subclass replaces by overriding
    ``score_token_requests``."""

    # 0.4: HFLM.loglikelihood tokenizes the requests, then calls this with
    # [((context, continuation), context_tokens, continuation_tokens), ...] and expects one
    # (loglikelihood, is_greedy) per request, in order.
    def _loglikelihood_tokens(
        self, requests: list[Any], disable_tqdm: bool = False, override_bs: int | None = None
    ) -> list[tuple[float, bool]]:
        return self.score_token_requests(requests, disable_tqdm, override_bs)

    def score_token_requests(
        self, requests: list[Any], disable_tqdm: bool = False, override_bs: int | None = None
    ) -> list[tuple[float, bool]]:
        """Each tokenized request's ``(loglikelihood, is_greedy)``; by default ``HFLM``'s."""
        return self.hf_score_token_requests(requests, disable_tqdm, override_bs)

    def hf_score_token_requests(
        self, requests: list[Any], disable_tqdm: bool = False, override_bs: int | None = None
    ) -> list[tuple[float, bool]]:
        """``HFLM``'s own scoring of tokenized requests (it feeds the cache hook itself;
        requests without strings, ``loglikelihood_rolling``'s windows, go here)."""
        return HFLM._loglikelihood_tokens(self, requests, disable_tqdm, override_bs)

    def detect_batch_size(self, requests: list[Any]) -> int:
        """The batch size ``HFLM`` would pick for ``batch_size=auto`` given ``requests``.

        0.4: ``HFLM._detect_batch_size(requests, pos=0)``, as its ``_loglikelihood_tokens``
        calls it; the only way to get the size ``hf`` itself would pick.
        """
        return int(self._detect_batch_size(requests, 0))
