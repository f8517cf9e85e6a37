"""Query circuits: the circuit behind one prompt, found from the prompt and its paraphrases.

The Best-of-N family (single, average, bon, ibon, bon-csm; registered in ``methods.bon``) scores
the prompt and p paraphrases, each against its own corruption, and keeps the candidate circuit
most faithful on the prompt. This package holds everything it needs, one concern per module:

- ``pairs``: a paraphrase pair (``ParaphrasePair``) and the pair file formats;
- ``checks``: every pair checked against the model before it may be scored;
- ``families``: the built-in template families, one module each;
- ``templates``, ``llm_source``, ``sources``: where pairs come from (templates, an LLM, a file);
- ``variants``: iBoN and BoN-CSM circuits at any budget from the BoN circuits, no model pass;
- ``scoring``: each pair's score matrix, kept in the result store and batched for EAP-IG;
- ``pool``: each distinct circuit evaluated once, and the store's memo of their faithfulness;
- ``pipeline``: ``query_circuits``, the one run behind every variant; ``outcome``: its result;
- ``details``: ``QueryCircuitDetails``, what a stored result keeps, and its circuits at any budget;
- ``overlap``: what the candidate circuits share; ``report``: the command line's text report.

Nothing here imports ``circuitviz.methods``: the registered methods hand the pipeline their
settings and the base scorer.
"""
