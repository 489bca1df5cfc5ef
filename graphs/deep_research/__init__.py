"""The `deep_research` graph: clarify, plan, parallel researchers (`Send`), cited report."""
