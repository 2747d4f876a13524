"""Text front end: the checkpoint's tokenizer and the reference's default text clean-up."""
