"""The command line, the web server and what the bot renders."""
