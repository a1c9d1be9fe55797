"""Stop-word lists shipped as module data (no downloads at run time; nltk's corpora are not assumed).

``ENGLISH`` is the Snowball/NLTK English list (179 words, including the contraction forms our
tokenizer keeps whole, such as ``don't``). ``ARABIC`` is a short list of frequent function words
(prepositions, pronouns, demonstratives, relatives, particles), stored after
:func:`~es_plugin_bridge.text.arabic.normalize_arabic` so it matches normalised text.
"""

from __future__ import annotations

from es_plugin_bridge.text.arabic import normalize_arabic

_ENGLISH_RAW = """
    i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves
    he him his himself she she's her hers herself it it's its itself they them their theirs themselves
    what which who whom this that that'll these those am is are was were be been being have has had
    having do does did doing a an the and but if or because as until while of at by for with about
    against between into through during before after above below to from up down in out on off over
    under again further then once here there when where why how all any both each few more most other
    some such no nor not only own same so than too very s t can will just don don't should should've
    now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn
    hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn
    shouldn't wasn wasn't weren weren't won won't wouldn wouldn't
"""

_ARABIC_RAW = """
    من إلى الى عن على في مع هذا هذه ذلك تلك هؤلاء هناك هنا الذي التي الذين اللذان اللتان اللواتي
    ما ماذا متى أين كيف لماذا هل أن إن أو ثم لا لم لن قد لقد كان كانت يكون تكون هو هي هم هن أنا نحن
    أنت أنتم كل بعض غير بين عند حتى إذا لكن يا أي أيضا فقط كما منذ قبل بعد فوق تحت حول خلال مثل
    عليه عليها فيه فيها منه منها له لها لهم به بها و ف ب ل ك
"""
ENGLISH = frozenset(_ENGLISH_RAW.split())
ARABIC = frozenset(normalize_arabic(word) for word in _ARABIC_RAW.split())
