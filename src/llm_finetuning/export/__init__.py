"""`finetune export`: a run's model as a plain Hugging Face folder with a model card saying how it was made.

`evidence` gathers what the card states (brief, records, gate, run figures, eval, diagnosis) without ML
imports; `card` renders it as README.md (pure); `folder` writes the model, tokenizer and card (heavy).
"""
