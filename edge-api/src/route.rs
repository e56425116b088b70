//! A route: the methods one path answers, each with its handler, in one value. Each surface (the
//! partner API in `routes`, the portal's pages and JSON API in `portal`) declares its paths as a
//! `match` that returns one of these, and both the dispatch and the 405 answer (with `Allow`) are
//! read from it, so they cannot disagree.

use std::future::Future;
use std::pin::Pin;

use shared_types::ErrorCode;
use worker::{Method, Request, Response, Url};

use crate::ctx::Ctx;
use crate::error::ApiError;

/// A request as the router hands it to a handler: the request (its body unread), the event's
/// context and the parsed URL.
pub struct Incoming<'a> {
    /// The request.
    pub req: Request,
    /// The event's context.
    pub ctx: &'a Ctx,
    /// The request's URL, parsed once.
    pub url: &'a Url,
}

/// What a handler's future yields.
pub type Answer = Result<Response, ApiError>;

/// What answers one method of a path: an async function of the surface's call `C`, boxed.
pub type Handler<'a, C> = Box<dyn FnOnce(C) -> Pin<Box<dyn Future<Output = Answer> + 'a>> + 'a>;

/// Boxes an async function of `C` as a [`Handler`].
pub fn handler<'a, C, F, Fut>(f: F) -> Handler<'a, C>
where
    F: FnOnce(C) -> Fut + 'a,
    Fut: Future<Output = Answer> + 'a,
{
    Box::new(move |call| Box::pin(f(call)))
}

/// The methods one path answers, in the order `Allow` lists them, each with its handler.
pub struct Route<'a, C> {
    methods: Vec<(Method, Handler<'a, C>)>,
}

impl<'a, C: 'a> Default for Route<'a, C> {
    fn default() -> Self {
        Self::new()
    }
}

/// One builder method per HTTP method (`get`, `post`, ...), each a shorthand for [`Route::on`].
macro_rules! builders {
    ($($name:ident => $method:ident,)+) => {
        $(
            #[doc = concat!("Answers ", stringify!($method), " with `f`.")]
            pub fn $name<F, Fut>(self, f: F) -> Self
            where
                F: FnOnce(C) -> Fut + 'a,
                Fut: Future<Output = Answer> + 'a,
            {
                self.on(Method::$method, f)
            }
        )+
    };
}

impl<'a, C: 'a> Route<'a, C> {
    /// A path that answers nothing yet.
    pub fn new() -> Self {
        Self {
            methods: Vec::new(),
        }
    }

    /// Answers `method` with `f`.
    pub fn on<F, Fut>(mut self, method: Method, f: F) -> Self
    where
        F: FnOnce(C) -> Fut + 'a,
        Fut: Future<Output = Answer> + 'a,
    {
        debug_assert!(
            self.methods.iter().all(|(m, _)| *m != method),
            "{method} declared twice"
        );
        self.methods.push((method, handler(f)));
        self
    }

    builders! {
        get => Get,
        post => Post,
        put => Put,
        patch => Patch,
        delete => Delete,
        options => Options,
    }

    /// The methods, in the order declared.
    pub fn methods(&self) -> Vec<Method> {
        self.methods.iter().map(|(m, _)| m.clone()).collect()
    }

    /// The handler of `method`, the request's method as sent (the platform's method type reads
    /// one it does not know, such as `QUERY`, as GET); any other method is refused with 405 and
    /// `Allow` listing the declared ones. `path` names the path in the refusal.
    pub fn handler(mut self, method: &str, path: &str) -> Result<Handler<'a, C>, ApiError> {
        let method = method.to_ascii_uppercase();
        match self.methods.iter().position(|(m, _)| m.as_ref() == method) {
            Some(found) => Ok(self.methods.swap_remove(found).1),
            None => {
                let methods = self.methods();
                let allow: Vec<&str> = methods.iter().map(Method::as_ref).collect();
                Err(ApiError::new(
                    ErrorCode::MethodNotAllowed,
                    format!(
                        "{method} {path} is not supported; use {}",
                        allow.join(" or ")
                    ),
                )
                .with_allow(allow.join(", ")))
            }
        }
    }

    /// The same methods, each handler wrapped by `wrap` (which runs what a surface does before
    /// its handlers, such as authenticating the portal's session).
    pub fn map<D>(self, wrap: impl Fn(Handler<'a, C>) -> Handler<'a, D>) -> Route<'a, D> {
        Route {
            methods: self
                .methods
                .into_iter()
                .map(|(method, handler)| (method, wrap(handler)))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn nothing(_: ()) -> Answer {
        Err(ApiError::not_found("nothing"))
    }

    #[test]
    fn the_declared_methods_are_answered_and_any_other_is_a_405_listing_them() {
        let route = || Route::new().get(nothing).post(nothing);
        assert_eq!(route().methods(), [Method::Get, Method::Post]);
        assert!(route().handler("GET", "/x").is_ok());
        assert!(route().handler("post", "/x").is_ok());
        for method in ["HEAD", "PUT", "DELETE", "OPTIONS", "QUERY"] {
            let Err(err) = route().handler(method, "/x") else {
                panic!("{method} answered");
            };
            assert_eq!(err.code, ErrorCode::MethodNotAllowed);
            assert_eq!(err.code.http_status(), 405);
            assert_eq!(err.allow.as_deref(), Some("GET, POST"));
            assert_eq!(
                err.description,
                format!("{method} /x is not supported; use GET or POST")
            );
        }
    }

    #[test]
    fn a_wrapped_route_keeps_its_methods_in_order() {
        let route = Route::new()
            .options(nothing)
            .delete(nothing)
            .map(|h| handler(move |_: u8| h(())));
        assert_eq!(route.methods(), [Method::Options, Method::Delete]);
    }
}
