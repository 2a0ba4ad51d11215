package store

import "github.com/idem-dev/idem/idemtype"

// PromotedLeft returns the queues where a claim's promotions made jobs
// available (promoted: their ids, by queue) that the claim did not take
// (taken): the claimers of those queues are to be told after the commit,
// as the promoter tells them of what it promotes. What counts is the
// promoted ids left, not how many jobs of the queue the claim took (an
// older available job ranks before a promoted one); a claim that took
// every job it promoted leaves none. Both stores' claims decide by it.
func PromotedLeft(promoted map[string][]int64, taken []*idemtype.JobRow) []string {
	var queues []string
	var took map[int64]bool
	for q, ids := range promoted {
		if len(ids) > len(taken) {
			queues = append(queues, q) // it cannot have taken them all
			continue
		}
		if took == nil {
			took = make(map[int64]bool, len(taken))
			for _, j := range taken {
				took[j.ID] = true
			}
		}
		for _, id := range ids {
			if !took[id] {
				queues = append(queues, q)
				break
			}
		}
	}
	return queues
}
