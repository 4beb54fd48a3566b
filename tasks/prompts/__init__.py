"""Prompts and replies: the templates and their texts, parsing replies into slot labels, the
judges' verdict formats, vendor model profiles and the checks of a judge before it is called."""
