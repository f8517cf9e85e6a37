"""A model the user names (a typed local folder) is shown as typed in the page's loading line and
run status: a folder named ``**x**`` was drawn in bold, markdown read into the user's own text
(an audit, 2026-12-07)."""

from __future__ import annotations

from concurrent.futures import Future

from circuitviz.ui import run


class _Line:
    def __init__(self, said: list[str]):
        self.said = said

    def info(self, text: str) -> None:
        self.said.append(text)

    def empty(self) -> None:
        pass


class _Slow(Future):
    """Done at the third look: the page draws its loading line once (the first look decides to wait)."""

    def __init__(self):
        super().__init__()
        self.looks = 0

    def done(self) -> bool:
        self.looks += 1
        if self.looks == 3:
            self.set_result("the model")
        return super().done()


def test_the_loading_line_shows_a_typed_folder_as_typed(monkeypatch):
    said: list[str] = []
    monkeypatch.setattr(run.loaders, "model_future", lambda model_id, device: _Slow())
    monkeypatch.setattr(run.calibration, "last_load", lambda model_id: None)
    monkeypatch.setattr(run.startup, "mark_once", lambda what: None)
    monkeypatch.setattr(run.st, "empty", lambda: _Line(said))
    monkeypatch.setattr(run, "POLL_S", 0.0)

    assert run.load_model_or_stop("/models/**x**_[a](http://e.example)", "cpu") == "the model"
    assert len(said) == 1
    line = said[0]
    assert "**x**" not in line and r"\*\*x\*\*" in line
    assert "](http" not in line
