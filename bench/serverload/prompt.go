package main

import (
	"math"
	"math/rand/v2"
	"strings"
)

// sentences are the prompts' material: plain English of varied subjects,
// so that no two prompts share more than their first token (a server's
// prefix cache finds nothing to reuse) and tokenizers see ordinary text.
var sentences = []string{
	"The lighthouse keeper wrote down the color of the sea every morning for forty years.",
	"A small bakery on the corner sells bread that is still warm at six o'clock.",
	"Mountain goats can climb nearly vertical rock faces in search of salt.",
	"The committee postponed its decision until the engineers finished the report.",
	"She planted tomatoes, beans and a row of sunflowers along the fence.",
	"Old maps often show sea monsters in the corners where knowledge ran out.",
	"The train to the coast leaves twice a day and stops at every village.",
	"Bees communicate the direction of flowers with a dance inside the hive.",
	"He repaired the bicycle with a borrowed wrench and a piece of wire.",
	"The museum opened a new wing for paintings from the northern provinces.",
	"Rain fell all night, and by morning the river had covered the footpath.",
	"A good recipe for soup begins with onions cooked slowly in butter.",
	"The children built a fort of blankets and chairs in the living room.",
	"Astronomers measured the distance to the star by watching it wobble.",
	"The library keeps its rarest books in a cold room without windows.",
	"Every spring the farmers gather to trade seeds and stories.",
	"The violinist tuned her instrument while the audience found their seats.",
	"Glaciers carve wide valleys as they move slowly down the mountains.",
	"The startup hired three engineers and rented an office above a cafe.",
	"A fox crossed the snowy field, leaving a straight line of small prints.",
	"The recipe calls for two cups of flour, one egg and a pinch of salt.",
	"Sailors once navigated by the stars, a compass and careful arithmetic.",
	"The city council voted to plant a thousand trees along the avenues.",
	"His grandmother taught him to play chess on a board with a missing rook.",
	"Volcanic soil is rich, which is why vineyards grow on the slopes.",
	"The detective noticed that the clock in the hall had stopped at noon.",
	"Wind turbines turn slowly on the hills above the harbor town.",
	"The students argued about the meaning of the poem until the bell rang.",
	"A thunderstorm knocked out the power, so they read by candlelight.",
	"The market smelled of oranges, fresh fish and roasted coffee.",
	"Penguins huddle together to survive the long Antarctic winter.",
	"The architect drew the bridge with three arches of pale stone.",
	"On weekends the park fills with runners, dogs and kites.",
	"The old radio still worked after they replaced a single tube.",
	"Scientists found that the ancient lake had dried up in a few decades.",
	"The baker's apprentice learned to fold the dough forty times.",
	"A narrow staircase led up to the attic, where the trunks were stored.",
	"The orchestra rehearsed the symphony three times before the concert.",
	"Cranes migrate thousands of kilometers between their summer and winter homes.",
	"The software update fixed the bug but made the program slower.",
	"Her letter arrived a week late, stamped by three different post offices.",
	"The canal was dug by hand more than two hundred years ago.",
	"Owls turn their heads far around because their eyes cannot move.",
	"The mayor cut the ribbon, and the new swimming pool was open.",
	"They hiked along the ridge until the fog lifted over the valley.",
	"The printing press made books cheap enough for ordinary families.",
	"A cat slept on the warm roof of the car in the afternoon sun.",
	"The tailor measured the sleeves twice before cutting the cloth.",
}

// Prompt returns prompt i (i < 0 for the warm-up's): about tokens tokens
// of text at charsPerToken characters a token, less one for the BOS token
// a server adds. Prompt i starts with sentence i (mod their number), and
// the rest follow in an order of i's own.
func Prompt(i, tokens int, charsPerToken float64) string {
	n := len(sentences)
	order := make([]int, n)
	for k := range order {
		order[k] = k
	}
	first := (i%n + n) % n
	order[0], order[first] = order[first], order[0]
	// Fisher-Yates over the rest, from PCG (its output is specified, so a
	// prompt is the same from every build).
	r := rand.NewPCG(uint64(i+2), 0x5eed)
	for k := n - 1; k > 1; k-- {
		j := 1 + int(r.Uint64()%uint64(k))
		order[k], order[j] = order[j], order[k]
	}
	want := int(math.Round(float64(max(tokens-1, 1)) * charsPerToken))
	var b strings.Builder
	for k := 0; b.Len() < want; k++ {
		for _, w := range strings.Fields(sentences[order[k%n]]) {
			if b.Len() >= want {
				break
			}
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(w)
		}
	}
	return b.String()
}
