package poolmath

import (
	"math/rand/v2"
	"testing"
	"time"
)

// nextSlot finds what cron finds, for schedules of every shape.
func TestTheScheduleArithmeticAgreesWithCron(t *testing.T) {
	schedules := []string{"* * * * *", "*/10 * * * *", "0 * * * *", "30 2 * * *", "0 2 * * 6", "15 3 1 * *",
		"0 0 29 2 *", "0 2 30 2 *", "5,35 8-17 * * 1-5", "0 0 13 * 5", "0 12 * 1,7 *", "59 23 31 12 *",
		"@daily", "@hourly", "@weekly", "@monthly", "@yearly", "0 0 1-7 * 1", "*/7 */5 */3 * *"}
	r := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, spec := range schedules {
		s, err := cronParser.Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		for range 300 {
			at := base.Add(time.Duration(r.Int64N(int64(4 * 366 * 24 * time.Hour))))
			if r.IntN(3) == 0 {
				at = at.Truncate(time.Minute) // on a slot boundary
			}
			if got, want := nextSlot(s, at), s.Next(at); !got.Equal(want) {
				t.Fatalf("%q after %s: %s, cron says %s", spec, at, got, want)
			}
		}
	}
}
