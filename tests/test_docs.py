"""The generated pages of docs/ are current: what `make docs` would write is what is committed."""
from nbhelpers.views.docs import DOCS, PAGES


def test_the_generated_pages_are_current():
    stale = [name for name, page in PAGES.items() if not (DOCS / name).exists() or (DOCS / name).read_text() != page()]
    assert not stale, f"run `make docs`: {stale} differ from the code"


def test_every_culprit_rule_is_on_its_page_in_order():
    from nbhelpers.diagnosis.culprit import RULES

    text = (DOCS / "culprit-rules.md").read_text()
    at = [text.index(f"`{r.__name__}`") for r in RULES]
    assert at == sorted(at)
