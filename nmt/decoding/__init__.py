"""Decoding: where a trained model turns sources into translations.

search     greedy, batched beam search and sampling over the models' step contract
translate  batched decoding of id lists, n-best, source clipping, writing translations
export     a Transformer run as a CTranslate2 model (`nmt export`)
engines    what decodes: PyTorch (our search; int8 where shipped) or CTranslate2
evaluate   sacreBLEU BLEU/chrF of a split, BLEU by length, the split's attention matrices
api        a trained run (or an ensemble) as a Python object and its result types
           (`nmt.load`, re-exported by `nmt.api`)

May import nmt.core, nmt.data, nmt.models and nmt.align; never training or presentation.
"""
