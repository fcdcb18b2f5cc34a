package payloadserver

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"nodepool.dev/nodepool/internal/secrets"
)

// firstFetchRecorder writes secrets.AnnotationFirstFetch on a token Secret
// after the first successful fetch with one of its tokens, off the request
// path: the handler only hands it a TokenSecretRef. It writes once per token
// Secret (the annotation is never overwritten), deduplicates in memory so a
// thousand machines booting at once make one patch, and retries failures
// with backoff.
type firstFetchRecorder struct {
	reader  client.Reader // the informer cache
	writer  client.Client
	queue   workqueue.TypedRateLimitingInterface[TokenSecretRef]
	metrics *Metrics
	log     logr.Logger
	now     func() time.Time

	// fetchedAt holds the time of the first fetch of each token Secret not
	// recorded yet; done the Secrets recorded (by this process or another).
	fetchedAt sync.Map // types.UID → time.Time
	done      sync.Map // types.UID → struct{}
}

func newFirstFetchRecorder(reader client.Reader, writer client.Client, m *Metrics, log logr.Logger) *firstFetchRecorder {
	return &firstFetchRecorder{
		reader:  reader,
		writer:  writer,
		queue:   workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[TokenSecretRef]()),
		metrics: m,
		log:     log,
		now:     time.Now,
	}
}

// Observe notes a successful fetch. It is called on the request path: two
// map lookups, and a queue insert the first time.
func (r *firstFetchRecorder) Observe(ref TokenSecretRef) {
	if _, ok := r.done.Load(ref.UID); ok {
		return
	}
	if _, loaded := r.fetchedAt.LoadOrStore(ref.UID, r.now()); loaded {
		return // queued already, or being retried
	}
	r.queue.Add(ref)
}

// Forget drops what is known of a deleted token Secret.
func (r *firstFetchRecorder) Forget(uid types.UID) {
	r.done.Delete(uid)
	r.fetchedAt.Delete(uid)
}

// run records until ctx ends, with workers goroutines.
func (r *firstFetchRecorder) run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for r.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	r.queue.ShutDown()
	wg.Wait()
}

func (r *firstFetchRecorder) next(ctx context.Context) bool {
	ref, shutdown := r.queue.Get()
	if shutdown {
		return false
	}
	defer r.queue.Done(ref)
	patched, err := r.record(ctx, ref)
	if patched || err != nil {
		r.metrics.firstFetch(err)
	}
	if err != nil {
		if ctx.Err() == nil {
			r.log.Error(err, "recording the first fetch of a token Secret; will retry", "secret", ref.NamespacedName)
		}
		r.queue.AddRateLimited(ref)
		return true
	}
	r.queue.Forget(ref)
	return true
}

// record patches the annotation unless the Secret has it or is gone. The
// patch carries the resource version it was computed from, so two replicas
// of the server cannot both write: the second gets a conflict, retries, and
// then finds the annotation. It reports whether it patched.
func (r *firstFetchRecorder) record(ctx context.Context, ref TokenSecretRef) (bool, error) {
	var s corev1.Secret
	if err := r.reader.Get(ctx, ref.NamespacedName, &s); err != nil {
		if apierrors.IsNotFound(err) {
			r.Forget(ref.UID)
			return false, nil
		}
		return false, err
	}
	if s.UID != ref.UID {
		r.Forget(ref.UID)
		return false, nil
	}
	if _, ok := s.Annotations[secrets.AnnotationFirstFetch]; ok {
		r.done.Store(ref.UID, struct{}{})
		r.fetchedAt.Delete(ref.UID)
		return false, nil
	}
	at := r.now()
	if v, ok := r.fetchedAt.Load(ref.UID); ok {
		at = v.(time.Time)
	}
	patched := s.DeepCopy()
	if patched.Annotations == nil {
		patched.Annotations = map[string]string{}
	}
	patched.Annotations[secrets.AnnotationFirstFetch] = secrets.FormatTime(at)
	if err := r.writer.Patch(ctx, patched, client.MergeFromWithOptions(&s, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			r.Forget(ref.UID)
			return false, nil
		}
		return false, err
	}
	r.done.Store(ref.UID, struct{}{})
	r.fetchedAt.Delete(ref.UID)
	r.log.V(1).Info("recorded the first fetch of a token Secret", "secret", ref.NamespacedName, "at", secrets.FormatTime(at))
	return true, nil
}
