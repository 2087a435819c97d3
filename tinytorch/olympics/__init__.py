"""The Torch Olympics: the capstone contest's rules and scores (module 20)."""
