"""The only streamlit-importing code of the package: cached loaders, URL state, inputs, runs, result views.

Pages stay thin: widgets in, one call into circuitviz, renderers out. Nothing here imports
torch at import time; models and results are loaded when a page first needs them.
"""
