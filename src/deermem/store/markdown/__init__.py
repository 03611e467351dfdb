"""The Markdown store: the embedded default, one Markdown file per fact."""
