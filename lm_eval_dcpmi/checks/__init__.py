"""The document checks a DC-PMI task runs when it is built, before the model scores
anything: options, targets, premises, token counts (``documents``) and null fields the
templates read (``null_fields``)."""
