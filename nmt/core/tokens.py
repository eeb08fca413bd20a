"""Special token ids, shared by the data layer (SentencePiece is trained with them) and the
models and search (padding masks, BOS/EOS). The lowest layer: it imports nothing from nmt."""

PAD, UNK, BOS, EOS = 0, 1, 2, 3
EOS_PIECE = "</s>"  # how EOS is shown as a token in alignment records and plots
