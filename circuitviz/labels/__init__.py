"""Labels that say what a circuit's nodes and signals mean.

- ``logit_lens``: the tokens each node's output promotes and suppresses (always available);
- ``sae``: SAE features (sae-lens) at a node's layer with their top contexts and promoted tokens;
- ``llm``: short descriptions of features and ACC++ signals from an OpenAI-compatible endpoint;
- ``steer``: acting on labels, zeroing chosen SAE features and measuring the answer's change.

Submodules are imported on use: sae-lens and openai load only when their labels are asked for.
"""
