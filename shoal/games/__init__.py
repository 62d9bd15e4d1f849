"""Two-player games as pluggable parts: the self-play opponent pool and two-player
evaluation. Generic runners never import a game; they take these as plug-ins."""
