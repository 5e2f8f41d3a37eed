//! Points compiled in but never reached: the clean run's hits against the
//! points linked into the binary ([`crashpoint::points`]).
//!
//! A point is known per crate linked into the binary, and a binary links
//! far more than one subject's code (a test binary holds every test's
//! subjects). So the list is scoped to the modules the clean run went
//! through: a module with one point passed is code the subject runs, and
//! each of its other points is a place no scenario will crash (a branch the
//! job never takes, code behind a feature not enabled). Modules none of
//! whose points ran are some other program's. A subject that shares code
//! with others names the points of branches it never takes
//! ([`Subject::points_not_taken`]); those alone are left out.

use crashpoint::points::Site;

use crate::config::Config;
use crate::error::Error;
use crate::subject::Subject;

/// The points the clean run never passed (it passed `sites`) in the
/// modules it went through, `name (file:line)`; with
/// [`Config::strict_points`] a non-empty list refuses the sweep.
pub(crate) fn never_passed<S: Subject>(
    subject: &S,
    config: &Config,
    sites: &[&'static Site],
) -> Result<Vec<String>, Error> {
    let not_taken = subject.points_not_taken();
    let points: Vec<String> = crashpoint::points::never_passed(sites)
        .iter()
        .filter(|site| !not_taken.contains(&site.name))
        .map(ToString::to_string)
        .collect();
    if config.strict_points && !points.is_empty() {
        return Err(Error::PointsNeverPassed {
            subject: subject.name(),
            points,
        });
    }
    Ok(points)
}
