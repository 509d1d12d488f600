"""What answers each slash command, button and modal: one module per command family."""
