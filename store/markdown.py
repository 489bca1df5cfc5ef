"""HTML to markdown with trafilatura: the one converter for web pages (tools.web_read) and
knowledge-base documents (store.knowledge)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, TypeAlias

import lxml.html
import trafilatura
from trafilatura.utils import load_html

HtmlTree: TypeAlias = lxml.html.HtmlElement


def parse_html(html: str | bytes) -> HtmlTree | None:
    """The document tree of `html` (bytes: trafilatura honours the declared encoding), or None."""
    return load_html(html)


def html_title(tree: HtmlTree) -> str | None:
    """The page title found in the tree's metadata, or None."""
    metadata = trafilatura.extract_metadata(copy.deepcopy(tree))
    return metadata.title if metadata is not None else None


def tree_to_markdown(tree: HtmlTree, *, include_links: bool, favor_recall: bool = False) -> str:
    """Markdown of the tree's main content (headings, lists, tables, formatting kept).

    When precise extraction finds nothing, extraction favouring recall is tried, then the
    page's plain text. `favor_recall` starts with recall, for a tree already cut to the content.
    """
    options: dict[str, Any] = dict(
        output_format="markdown", include_links=include_links, include_tables=True, include_formatting=True
    )
    markdown = trafilatura.extract(copy.deepcopy(tree), favor_recall=favor_recall, **options)
    if not markdown and not favor_recall:
        markdown = trafilatura.extract(copy.deepcopy(tree), favor_recall=True, **options)
    if not markdown:
        markdown = trafilatura.html2txt(tree)
    return (markdown or "").strip()


def html_to_markdown(
    html: str | bytes,
    *,
    include_links: bool = False,
    select: Callable[[HtmlTree], HtmlTree] | None = None,
    favor_recall: bool = False,
) -> tuple[str | None, str]:
    """(title, markdown) of an HTML page's main content.

    Args:
        html: the page; give bytes when the page's declared encoding should be honoured.
        include_links: keep links as markdown links (web pages) or drop them (knowledge bases).
        select: cuts the parsed tree down to the wanted content (CSS selectors); the title is
            read before it runs.
        favor_recall: keep as much as extraction can (for a tree `select` already cut down).
    """
    tree = parse_html(html)
    if tree is None:
        return None, ""
    title = html_title(tree)
    if select is not None:
        tree = select(tree)
    return title, tree_to_markdown(tree, include_links=include_links, favor_recall=favor_recall)
