"""The source lexicon of the synthetic grammar (nmt/data/synth.py): word lists by role."""

ANIMATE = [
    "man", "woman", "child", "boy", "girl", "teacher", "doctor", "farmer", "student", "king",
    "queen", "friend", "baby", "mother", "father", "sister", "brother", "soldier", "driver", "dog",
    "cat", "horse", "bird", "mouse", "wolf", "rabbit", "bear", "fox", "cow", "lion", "monkey",
    "duck"
]
THINGS = [
    "book", "table", "chair", "house", "garden", "river", "tree", "car", "door", "window", "box",
    "ball", "apple", "cake", "bottle", "cup", "letter", "road", "bridge", "city", "village",
    "forest", "mountain", "lake", "school", "kitchen", "park", "shop", "boat", "train", "bag",
    "key", "hat", "knife", "leaf", "flower", "stone", "wall", "picture", "lamp", "bed", "field",
    "church", "market", "island", "beach"
]
IRREGULAR_PLURAL = {"man": "men", "woman": "women", "child": "children", "mouse": "mice",
                    "wolf": "wolves", "knife": "knives", "leaf": "leaves"}
TRANSITIVE = [
    "see", "watch", "find", "like", "love", "help", "follow", "visit", "carry", "push", "pull",
    "open", "close", "clean", "paint", "build", "buy", "sell", "cook", "eat", "drink", "write",
    "draw", "catch", "throw", "hold", "take", "bring", "hear", "know", "remember", "call", "ask",
    "teach", "wash", "fix", "miss", "want", "need", "touch", "answer", "enjoy", "kick", "count",
    "climb", "chase"
]
INTRANSITIVE = [
    "sleep", "run", "walk", "sing", "dance", "laugh", "cry", "swim", "wait", "smile", "jump",
    "arrive", "fall", "sit", "stand", "work", "play", "rest", "shout", "travel", "listen", "study"
]
IRREGULAR_PAST = {
    "see": "saw", "find": "found", "build": "built", "buy": "bought", "sell": "sold",
    "eat": "ate", "drink": "drank", "write": "wrote", "draw": "drew", "catch": "caught",
    "throw": "threw", "hold": "held", "take": "took", "bring": "brought", "hear": "heard",
    "know": "knew", "teach": "taught", "sleep": "slept", "run": "ran", "sing": "sang",
    "swim": "swam", "fall": "fell", "sit": "sat", "stand": "stood",
}
ADJECTIVES = [
    "big", "small", "old", "young", "red", "blue", "green", "white", "black", "happy", "sad",
    "tall", "short", "new", "long", "heavy", "quiet", "loud", "clever", "lazy", "brave", "angry",
    "hungry", "tired", "beautiful", "ugly", "strong", "weak", "rich", "poor", "warm", "cold",
    "dark", "bright", "hot", "dirty", "empty", "full", "cheap", "strange", "famous", "busy",
    "gentle", "wild", "sweet", "round", "soft"
]
MANNER = [
    "quickly", "slowly", "quietly", "loudly", "carefully", "happily", "sadly", "easily", "badly",
    "well", "gently", "suddenly", "early", "late", "together", "again", "calmly", "proudly",
    "bravely", "politely"
]
FREQUENCY = ["always", "often", "sometimes", "rarely", "usually"]
INTENSIFIERS = ["very", "quite", "rather", "extremely"]
PREPOSITIONS = (
    "in", "on", "under", "near", "behind", "with", "without", "from", "into", "across",
    "through", "over", "around", "beside", "towards",
    "in front of", "next to", "on top of", "far from",
)
NUMERALS = ["two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
SG_DETS = [
    "the", "a", "this", "that", "every", "each", "my", "your", "his", "her", "its", "our", "their"
]
PL_DETS = [
    "the", "these", "those", "some", "many", "my", "your", "his", "her", "its", "our", "their"
]
DROPPED_DETS = frozenset({"the", "a", "an"})
COORDINATORS = ["and", "but", "or", "so"]
SUBORDINATORS = ["because", "although", "while", "when"]
# (subject form, object form, third person singular?)
PRONOUNS = (("i", "me", False), ("you", "you", False), ("he", "him", True),
            ("she", "her", True), ("it", "it", True), ("we", "us", False),
            ("they", "them", False))
FUNCTION_WORDS = ("will", "do", "does", "did", "not", "of", "who", "which", ".")
