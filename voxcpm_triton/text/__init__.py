"""Text front end: the checkpoint's tokenizer, the reference's default text clean-up and its optional
spoken-form normalisation."""
