"""One module per CLI verb. Each defines `command`, a click.Command; heavy imports stay inside it."""
