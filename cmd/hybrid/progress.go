package main

import (
	"io"
	"os"
	"time"

	"github.com/jedib0t/go-pretty/v6/progress"

	"hybrid/runtime"
)

// progressMin is the smallest job worth a progress bar.
const progressMin = 64 << 20

// bar returns a runtime.Progress that draws a go-pretty progress bar titled
// title on w while a job of at least progressMin bytes runs, if w is a
// terminal; otherwise nil.
func bar(w io.Writer, title string) (runtime.Progress, func()) {
	f, ok := w.(*os.File)
	if !ok {
		return nil, func() {}
	}
	if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return nil, func() {}
	}
	var pw progress.Writer
	var tr *progress.Tracker
	update := func(done, total int64) {
		if total < progressMin {
			return
		}
		if pw == nil {
			pw = progress.NewWriter()
			pw.SetOutputWriter(f)
			pw.SetUpdateFrequency(100 * time.Millisecond)
			pw.SetTrackerLength(30)
			pw.Style().Visibility.ETA = true
			tr = &progress.Tracker{Message: title, Total: total, Units: progress.UnitsBytes}
			pw.AppendTracker(tr)
			go pw.Render()
		}
		tr.SetValue(done)
	}
	stop := func() {
		if pw == nil {
			return
		}
		tr.MarkAsDone()
		for pw.IsRenderInProgress() && pw.LengthActive() > 0 {
			time.Sleep(20 * time.Millisecond)
		}
		pw.Stop()
		for pw.IsRenderInProgress() {
			time.Sleep(10 * time.Millisecond)
		}
	}
	return update, stop
}
