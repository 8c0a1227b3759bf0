"""A second, slowed listening of audio whose first hearing asked the desk for nothing.

On a phone line Whisper tiny loses fast, flat voices: eSpeak NG's "please find out about
wind turbines" is heard "Please find out, come up with, go right in". Read as if it had
been recorded at 80% of its rate (slower and lower), the same audio is heard "Please find
out about, wind turbine". A request that the first hearing missed and the second caught is
believed only when it names one of the desk's topics: a slowed listening is a second guess,
and guesses at what the desk knows about are the ones worth taking ("what if it rains
tomorrow", slowed, is "what, is it ready tomorrow?": a question, about nothing the desk
knows, so still no request). Wideband audio is listened to again the same way: eSpeak NG's
"what is a smart meter" is heard "What, in a smart meter.", slowed "what is a smart
meter" (on the tuning half of the bench's set one more request right, no false trigger).

A request about none of the desk's topics is listened to again too ("dig into, high, low
power": its slowed hearing may name "hydro power"), and the second listening is primed
with the desk's requests as whole sentences ("Research solar panels. Look into wind
turbines."), not the first's list of phrases: a second opinion primed differently errs
differently, and the list primed Whisper to answer with a list ("Look into, find out
about,"). Both measured on the phone bench (README: "Phone calls"). Whisper can echo a
sentence of that prompt ("Please look into wind turbines for me" for heat pumps, once, in
a `--quick` run): a second hearing names a topic it may have been told, which is why it
is only taken when the first asked for nothing the desk knows.

Measured with `voicehub bench --only phone` (README: "Phone calls"). Tried first and
dropped: rescoring Whisper's n-best list with the desk's rules (take the best alternative
that is a request when the best hypothesis is none). Of a beam of 5, the five hypotheses
differ mostly in punctuation: no request missed on the phone had an alternative that was
one. Of a beam of 10, ten hypotheses: one missed request had (0.16 below the best in mean
log-probability per token), but "what if it rains tomorrow" had an alternative calling a
tool 0.07 below its best, so no margin takes the one without the other.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["SLOWER", "Relisten", "names_topic", "singular"]

SLOWER = 0.8
"""The second listening reads the audio as if recorded at this share of its rate. Chosen on
the tuning half of the phone bench's evaluation set among 0.8, 0.85, 0.9, 0.95, 1.05 and
1.1 (most requests right, no unrelated utterance taken for one)."""


@dataclass(frozen=True, slots=True)
class Relisten:
    """When audio is listened to again, and which second hearing is believed.

    `is_request(words)`: the desk would act on these words (its scripted agent calls a
    tool); a first hearing that is not one is listened to again. `topics`: what the desk
    knows about (its knowledge base's topics); the second hearing is kept only when it is a
    request naming one of them. `asks_about(words)`: the words of the request's arguments
    (its topic: "" for no request, or one without arguments); when given, a first hearing
    that is a request about something other than the desk's topics is listened to again
    too ("dig into, high, low power", "look into matter in": the slowed hearing may name
    the topic; requests without a topic, "any news", are decoded once)."""

    is_request: Callable[[str], bool]
    topics: Sequence[str]
    asks_about: Callable[[str], str] | None = None
    prompt: str = ""
    """The second listening's decoding prompt ("" for the first's)."""

    def listens_again(self, words: str) -> bool:
        """Whether audio first heard as `words` is decoded a second time, slowed."""
        if not self.is_request(words):
            return True
        if self.asks_about is None:
            return False
        about = self.asks_about(words)
        return bool(about.strip()) and not names_topic(about, self.topics)

    def believes(self, words: str) -> bool:
        """Whether a second hearing of `words` replaces the first."""
        return bool(words) and self.is_request(words) and names_topic(words, self.topics)


def names_topic(words: str, topics: Sequence[str]) -> bool:
    """Whether `words` say every word of one of `topics`, singular or plural alike ("a
    solar panel" names "solar panels"; "the battery" names "batteries")."""
    heard = {singular(word) for word in re.findall(r"[\w']+", words.lower())}
    for topic in topics:
        wanted = {singular(word) for word in re.findall(r"[\w']+", topic.lower())}
        if wanted and wanted <= heard:
            return True
    return False


def singular(word: str) -> str:
    """A plural word's singular, roughly ("batteries" -> "battery", "panels" -> "panel")."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word
