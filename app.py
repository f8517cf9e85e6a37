"""circuitviz: the app. ``streamlit run app.py`` (or ``make app``).

Navigation over the pages in pages/ (their list: ``circuitviz.ui.pagelist``), and the sidebar
they share (model and device): ``circuitviz.ui.navigation.run_app``. Nothing heavy is imported
here: torch and the model load when a page first needs them.
"""

from circuitviz.ui.navigation import run_app

run_app()
