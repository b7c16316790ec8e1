"""allaction: the study of A2C against all-action actor-critic on Atari, above the ``rlhelpers`` helper.

Its experiments and variants (``experiment``), the report's figures and tables (``figures``, ``results``,
``seeds``, ``games``), the seeds' statistics, the ledger of predictions and the claims check (``claims``,
``ledger``), the gradient analysis (``analysis``), playback of a policy (``playback``), the notebook's study parts
(``notebook``, ``source``), the MathML exporter (``export``) and its command line (``cli``). It imports the helper;
the helper imports nothing of it.
"""
