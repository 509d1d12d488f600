"""Collecting evidence live: the only I/O on the diagnosers' side. Each source writes its files into a
bundle folder in the services' own formats and records its status; a source that is down, slow or
forbidden never stops the others."""
